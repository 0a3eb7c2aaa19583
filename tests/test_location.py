"""One location type: `file:line:column` written by `str(Location)` and read back by
`Location.parse`, whatever colons the file name holds."""

from __future__ import annotations

import pytest

from policyrun.errors import Location
from policyrun.render.codelocations import Resolver
from tracefactory import flagship

ODD_FILES = ["rulebooks/a.yaml", "C:\\work\\rb.yaml", "C:/work/rb.yaml", "a:b.yaml", "run:12:4/rb.yaml",
             "notes:12", "x:1:2", "<shipped>/upgrade.yaml", "has space/ü.yaml", ":", ""]


@pytest.mark.parametrize("file", ODD_FILES)
@pytest.mark.parametrize("line, column", [(1, 1), (280, 5), (3, 0)])
def test_a_position_reads_back_whatever_the_file_name(file: str, line: int, column: int) -> None:
    loc = Location(file, line, column)
    assert Location.parse(str(loc)) == loc


@pytest.mark.parametrize("text", ["rulebooks/a.yaml", "C:\\work\\rb.yaml", "C:/work/rb.yaml", "a:b.yaml",
                                  "notes:12", "build:42", "x:²:1", "f:0:3", "f:-1:3", "f: 3:1", "", ":"])
def test_text_without_a_position_is_a_file_alone(text: str) -> None:
    """Only `:line:column` with a line ends a position: a Windows drive, a name with a colon, a
    name that ends in `:12` (no column) and digits Python reads but int() refuses are files."""
    loc = Location.parse(text)
    assert loc == Location(text) and str(loc) == text


def test_a_file_alone_is_written_without_a_position() -> None:
    assert str(Location("C:\\rb.yaml")) == "C:\\rb.yaml"
    assert str(Location("rb.yaml", 3)) == "rb.yaml:3:0"


@pytest.mark.parametrize("text, expected", [
    ("C:\\work\\rb.yaml:3:1", ("C:\\work\\rb.yaml", 3, 1)),
    ("a:b.yaml:3:4", ("a:b.yaml", 3, 4)),
    ("notes:7:3:4", ("notes:7", 3, 4)),
])
def test_only_the_last_two_parts_are_the_position(text: str, expected: tuple[str, int, int]) -> None:
    assert Location.parse(text) == Location(*expected)


@pytest.mark.parametrize("recorded, expected", [("C:/work/rb.yaml:3:1", ("C:/work/rb.yaml", 3, 1)),
                                                ("rules/gate:2:160:5", ("rules/gate:2", 160, 5)),
                                                ("rules/gate:2", ("rules/gate:2", 0, 0))])
def test_reports_place_a_rulebook_line_in_the_file_the_trace_names(recorded: str,
                                                                    expected: tuple[str, int, int]) -> None:
    loc = Resolver(flagship()).rulebook(recorded)
    assert loc is not None and loc.at == Location(*expected)

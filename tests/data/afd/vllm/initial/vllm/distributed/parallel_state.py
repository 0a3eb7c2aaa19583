"""Process groups."""

_TP = None


def get_tp_group():
    return _TP

"""OpenAI-compatible server."""

def run_server():
    pass


def build_app():
    pass

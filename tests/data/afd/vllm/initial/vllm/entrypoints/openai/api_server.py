"""OpenAI-compatible server."""

def run_server():
    pass

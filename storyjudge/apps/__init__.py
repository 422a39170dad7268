"""Layer 3, the apps: the CLI, the web UI, the HTML report and the scripted test server."""

"""The Python client API: publish into input streams and subscribe to streams."""

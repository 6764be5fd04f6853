"""See torch_xla/__init__.py."""

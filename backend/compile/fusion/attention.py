"""stub"""
PATTERNS = ()

"""security-hostile-rails4: security-hostile on the four-rail bed (--rails 4); the same check."""
from security_hostile import check  # noqa: F401

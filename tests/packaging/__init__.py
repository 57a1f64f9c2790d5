"""What a user installs: the sdist, the wheel built from it, installed and run outside the checkout."""

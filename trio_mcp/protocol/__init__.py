"""The sans-IO protocol core: framing, types, versions and method tables. No trio in here."""

"""Write rules/schema.dl, the input relations' declarations, from facts/schema.py (their one
source): `python3 -m cpq.rules.write_schema`, after changing the schema (a test checks that the
committed file is the generated one)."""

from __future__ import annotations

from pathlib import Path

from ..facts.schema import SCHEMA_DL, schema_dl


def main() -> None:
    path = Path(__file__).resolve().parent.parent / SCHEMA_DL
    path.write_text(schema_dl(), encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""The judge lane (docs/configurations.md, judges): why a failed attempt failed, from a rules judge and an LLM judge,
and how far each judge agrees with human labels."""

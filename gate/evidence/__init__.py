"""Evidence: report writers, summaries and redaction."""

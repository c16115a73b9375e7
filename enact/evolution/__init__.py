"""Evolution: evidence signals, improvement candidates, curation and modes,
as plain logic the scanner and curator actors front."""

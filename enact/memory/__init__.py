"""Long-term memory: facts, their admission and merging, the search index, context for the model."""

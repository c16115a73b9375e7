"""Long-term memory: facts, their search index, the context sent to the model, identity."""

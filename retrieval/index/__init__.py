"""What is stored and indexed: passages, chunking, embeddings, vectors, the worker sync,
health, the lexical backends."""

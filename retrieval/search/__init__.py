"""Finding passages: the search pipeline, fusion, rerank, verified opening, evaluation."""

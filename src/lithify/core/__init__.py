"""What a fact is, beside the model: its lossless encoding (``codec``) and its identity
(``identity``: which captures are one call). Every stage imports down into it; it imports only
the model."""

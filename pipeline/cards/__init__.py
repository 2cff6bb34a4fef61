"""Model cards and their arithmetic: the card type, weight formats (bits per weight), architecture arithmetic
(parameters, KV bytes per token), where cards come from (the registry) and a card's cost per decode step.

May import: pipeline.core."""

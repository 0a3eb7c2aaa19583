"""Attention layer."""

class Attention:
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None):
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = scale
        self.num_kv_heads = num_kv_heads or num_heads

    def forward(self, query, key, value):
        return query

"""KV connector base."""

class KVConnectorBase_V1:
    def start_load_kv(self, forward_context, **kwargs):
        raise NotImplementedError

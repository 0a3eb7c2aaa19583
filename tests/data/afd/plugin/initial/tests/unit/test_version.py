from afd_plugin.compat import TARGET_VLLM_VERSION

# A test that mentions the markers is not a patch:
# ### PATCH START: not a patch


def test_constant_is_a_release():
    assert TARGET_VLLM_VERSION.count(".") == 2

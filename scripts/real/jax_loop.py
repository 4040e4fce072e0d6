"""A program nobody instrumented for specscope: a jitted JAX MLP step in a loop (XLA launches
through the driver API; no NVTX). Recorded whole (compilation included).

    XLA_PYTHON_CLIENT_PREALLOCATE=false nsys profile -t cuda python scripts/real/jax_loop.py
"""

import jax
import jax.numpy as jnp


@jax.jit
def step(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return x / (1e-3 + jnp.abs(x).max())


keys = jax.random.split(jax.random.PRNGKey(0), 7)
params = [jax.random.normal(k, (512, 512), dtype=jnp.float32) * 0.05 for k in keys[1:]]
x = jax.random.normal(keys[0], (64, 512))
for _ in range(200):
    x = step(params, x)
print("done", float(x.block_until_ready().sum()))

"""A small JAX program (XLA compiles its kernels to PTX and loads them as cubins): a jitted MLP
step, 20 times. bench/coverage.sh runs it with XLA_FLAGS=--xla_dump_to=DIR: the PTX XLA
writes there names the kernels it made, the independent list the report is compared with."""
import jax
import jax.numpy as jnp


@jax.jit
def step(w, x):
    def loss(w):
        h = jnp.tanh(x @ w[0])
        return jnp.mean((h @ w[1]) ** 2)

    g = jax.grad(loss)(w)
    return [wi - 0.01 * gi for wi, gi in zip(w, g)]


k = jax.random.PRNGKey(0)
w = [jax.random.normal(k, (256, 256)), jax.random.normal(k, (256, 16))]
x = jax.random.normal(k, (64, 256))
for _ in range(20):
    w = step(w, x)
jax.block_until_ready(w)
print("jax done", float(w[1].sum()))

"""A clean JAX program for bench/reliability/canary_programs.sh (issue 17): jit-compiled
integer arithmetic on arrays of odd sizes, a matmul, a gradient (XLA's own allocator over
its pool; the case caps it with XLA_PYTHON_CLIENT_MEM_FRACTION so cases can share the GPU).
Prints integer results (the gradient rounded) and OK."""
import jax
import jax.numpy as jnp

total = 0
f = jax.jit(lambda v: (v * 2 + 1).sum())
for n in (1, 3, 1000, 4099, 65537):
    total += int(f(jnp.arange(n, dtype=jnp.int32)))
m = jnp.ones((257, 129), jnp.float32) @ jnp.ones((129, 63), jnp.float32)
total += int(m.sum())
g = jax.grad(lambda w: jnp.sum(jnp.tanh(w * jnp.arange(100, dtype=jnp.float32) / 100.0) ** 2))(0.5)
print(f"total={total} grad={float(g):.4f}")
print("OK")

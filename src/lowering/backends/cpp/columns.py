"""Column reductions of the cpp kernels: reductions whose kept dims follow the reduced ones
(sums over rows: bias gradients, LayerNorm backward), emitted by codegen's ``_Emitter``.

Each unit of work keeps accumulator arrays over a block of the last (kept, contiguous) dim and
walks the reduced dims. When the column blocks and outer points are few, the reduction is split
along its first reduced dim into chunks of whole rows (``COL_CHUNK``), each storing its own
partials, combined in chunk order by the calling thread; the split follows from the sizes alone,
so results do not depend on the threads or on what else the kernel computes.
"""
from __future__ import annotations

import math

from . import formulas as F
from .dims import is_static as _static
from .reductions import MAX_PARTS, MIN_UNITS

ACC_BLOCK = 1024             # accumulator array length for column reductions
# A column reduction with few column blocks (and outer points) is split along its first reduced
# dim into chunks of about this many elements, each summing whole rows into its own partials,
# combined in chunk order (sizes alone decide, as for reductions.RED_CHUNK). Without the split,
# its units were narrow column blocks walking every row: 512 bytes read per 4 KiB row, which the
# hardware prefetchers do not follow across pages (the column sums of a 1024 x 1024 float32
# product took 191 us on two threads, 2.4x the time of reading it).
COL_CHUNK = 1 << 16


class ColumnReductions:
    """The column-reduction emitters of codegen's ``_Emitter`` (which provides ``dims``,
    ``reds``, ``reads``, ``b``, ``par`` and the helpers ``c``, ``_base``, ``_bases``, ``_body``,
    ``_decompose``, ``_flat_index``, ``_loop``, ``_prod``)."""

    def _column_reduction(self, red_dims):
        """Kept dims after the reduced ones: accumulator arrays over blocks of the last dim."""
        dims = self.dims
        inner = len(dims) - 1
        K = dims[inner][0]
        outer = [d for d in range(len(dims)) if d not in red_dims and d != inner]
        P = math.prod(dims[d][0] for d in outer)
        lines = []
        if _static(K) and K == 0:
            return []   # no kept element: nothing to reduce into
        if _static(K) and _static(P) and all(r.combinable for r in self.reds) and \
                all(_static(dims[d][0]) for d in red_dims):
            split = self._column_split(red_dims, P, min(K, ACC_BLOCK))
            if split:
                return self._split_column_reduction(red_dims, outer, P, min(K, ACC_BLOCK),
                                                    *split)
        if _static(K) and _static(P):
            BK = min(K, ACC_BLOCK)
            if self.par and P * (-(-K // BK)) < MIN_UNITS:
                BK = max(64, -(-K // -(-MIN_UNITS // max(P, 1))))
                BK = min(BK, K)
            NB = -(-K // BK)
            acc_len = BK
        else:   # the same blocking, computed at run time (BK <= ACC_BLOCK)
            cK, cP = self.c(K), self.c(P)
            acc_len = min(K, ACC_BLOCK) if _static(K) else ACC_BLOCK
            lines.append(f"int64_t st_bk = st_dim_min({cK}, {ACC_BLOCK});")
            if self.par:
                q = str(-(-MIN_UNITS // max(P, 1))) if _static(P) else \
                    f"(({MIN_UNITS} + st_dim_max({cP}, 1) - 1) / st_dim_max({cP}, 1))"
                lines.append(f"if (st_bk > 0 && {cP} * (({cK} + st_bk - 1) / st_bk) < "
                             f"{MIN_UNITS}) st_bk = st_dim_min(st_dim_min(st_dim_max(64, "
                             f"({cK} + {q} - 1) / {q}), {cK}), {ACC_BLOCK});")
            lines.append(f"const int64_t st_nb = st_bk > 0 ? ({cK} + st_bk - 1) / st_bk : 0;")
            BK, NB = "st_bk", "st_nb"
        names = [f"i{d}" for d in outer] + ["kb"]
        sizes = [dims[d][0] for d in outer] + [NB]
        body = self._decompose("p_", sizes, names)
        cB, cK = self.c(BK), self.c(K)
        body += [f"const int64_t k0 = kb * {cB};",
                 f"const int64_t k1 = k0 + {cB} < {cK} ? k0 + {cB} : {cK};"]
        for r in self.reds:
            body += r.declare_array(acc_len, cB)
        body += self._column_nest(outer, red_dims)
        for r in self.reds:
            body.append(f"for (int64_t k = k0; k < k1; ++k) {self._column_out(r, outer)} = "
                        f"{F.store_expr(r.out_acc.dt, r.final_array())};")
        return lines + self._loop("p_", self._prod([P, NB]), body)

    def _column_out(self, r, outer):
        """The element of reduction ``r``'s output at column ``k`` (outer point ``i<d>``)."""
        a = r.out_acc
        s = self.dims[-1][2][a.id]
        return f"p{a.id}[({self._base(a, {d: f'i{d}' for d in outer})}) + k * {self.c(s)}]"

    def _column_nest(self, outer, red_dims, rows=None):
        """The loops over the reduced dims of a column reduction around the SIMD loop over
        columns ``[k0, k1)`` that updates the accumulator arrays; ``rows``: (dim, lo, hi) C
        expressions bounding one reduced dim (a chunk of a split reduction)."""
        dims = self.dims
        idx = {d: f"i{d}" for d in outer}
        nest = []
        for depth, d in enumerate(red_dims):
            lo, hi = rows[1:] if rows and rows[0] == d else ("0", self.c(dims[d][0]))
            nest.append("  " * depth + f"for (int64_t i{d} = {lo}; i{d} < {hi}; ++i{d}) {{")
            idx[d] = f"i{d}"
        ind = "  " * len(red_dims)
        nest += [ind + x for x in self._bases(idx, self.reads + [s for s, _ in self.b.stores])]
        nest += [ind + "#pragma omp simd", ind + "for (int64_t k = k0; k < k1; ++k) {"]
        index = self._flat_index(red_dims) if any(r.is_arg for r in self.reds) else None
        nest += [ind + "  " + x for x in self._body(len(dims) - 1, "array", index)]
        nest.append(ind + "}")
        for depth in range(len(red_dims) - 1, -1, -1):
            nest.append("  " * depth + "}")
        return nest

    def _column_split(self, red_dims, P, BK):
        """(rows per chunk, chunks) of the first reduced dim when a static column reduction is
        split (see COL_CHUNK), else None; from the sizes alone."""
        dims = self.dims
        K = dims[-1][0]
        NB = -(-K // BK)
        n = dims[red_dims[0]][0]
        if P * NB >= MIN_UNITS or n < 2:
            return None
        row = K * math.prod(dims[d][0] for d in red_dims[1:])   # elements per step of dim n
        g = max(1, -(-COL_CHUNK // max(row, 1)), -(-n // MAX_PARTS))
        nc = -(-n // g)
        return (g, nc) if nc >= 2 else None

    def _split_column_reduction(self, red_dims, outer, P, BK, g, nc):
        """The column reduction in units (outer point, column block, chunk of g steps of the
        first reduced dim): each sums its rows into accumulator arrays and stores them as its
        partials; then each column combines its partials in chunk order."""
        dims = self.dims
        inner = len(dims) - 1
        K = dims[inner][0]
        NB = -(-K // BK)
        first = red_dims[0]
        n = dims[first][0]
        # partials: [outer point][chunk][column], one array per reduction (8 bytes per element:
        # no accumulator is wider), in the calling thread's scratch slot 3 (native.py)
        size = P * nc * K * 8
        lines = [f"char* const st_cpart = (char*)st_scratch(3, {size * len(self.reds)});"]
        lines += [f"{r.acc_t}* const st_cp{i} = ({r.acc_t}*)(st_cpart + {i * size});"
                  for i, r in enumerate(self.reds)]
        names = [f"i{d}" for d in outer] + ["kb", "kc"]
        body = self._decompose("p_", [dims[d][0] for d in outer] + [NB, nc], names)
        body += [f"const int64_t k0 = kb * {BK};",
                 f"const int64_t k1 = k0 + {BK} < {K} ? k0 + {BK} : {K};"]
        for r in self.reds:
            body += r.declare_array(BK, BK)
        body += self._column_nest(outer, red_dims, (
            first, f"kc * {g}", f"(kc * {g} + {g} < {n} ? kc * {g} + {g} : {n})"))
        pidx = self._flat_index(outer) if outer else "0"
        for i, r in enumerate(self.reds):
            body.append(f"for (int64_t k = k0; k < k1; ++k) st_cp{i}"
                        f"[(({pidx}) * {nc} + kc) * {K} + k] = {r.name}[k - k0];")
        lines += self._loop("p_", P * NB * nc, body)
        # the combination, on the calling thread: each column folds its partials in order
        comb = self._decompose("p_", [dims[d][0] for d in outer], [f"i{d}" for d in outer]) \
            if outer else []
        comb.append(f"for (int64_t k = 0; k < {K}; ++k) {{")
        for i, r in enumerate(self.reds):
            comb += ["  " + x for x in r.declare_scalar()]
            part = f"st_cp{i}[(p_ * {nc} + st_c) * {K} + k]"
            nan = f" {r.name}_nan |= ({part} != {part});" if r.nanflag else ""
            comb.append(f"  for (int64_t st_c = 0; st_c < {nc}; ++st_c) {{ "
                        f"{r.combine(part)}{nan} }}")
        for r in self.reds:
            comb.append(f"  {self._column_out(r, outer)} = "
                        f"{F.store_expr(r.out_acc.dt, r.final_scalar())};")
        comb.append("}")
        return lines + self._loop("p_", P, comb, par=False)

; The `real` benchmark group's z3 workload (bench/run.py): factor a 48-bit number into
; two factors below 2^24 over bit-vectors. z3 rewrites the terms, bit-blasts the
; multiplier into a large circuit and runs its SAT solver on it: its term tables, the
; circuit and the clause database are allocated as it goes. The answer is sat
; (281474641166387 = 16777213 x 16777199); bench/run.py checks it.
(set-logic QF_BV)
(declare-const x (_ BitVec 48))
(declare-const y (_ BitVec 48))
(assert (= (bvmul x y) (_ bv281474641166387 48)))
(assert (bvult x (_ bv16777216 48)))
(assert (bvult y (_ bv16777216 48)))
(assert (bvugt x (_ bv1 48)))
(assert (bvugt y (_ bv1 48)))
(check-sat)

"""The admission webhook: labels and gates training pods, guards the gate and declarations."""

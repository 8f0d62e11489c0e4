"""What users hold and call: Array, devices, the op families, starling.numpy, starling.random."""

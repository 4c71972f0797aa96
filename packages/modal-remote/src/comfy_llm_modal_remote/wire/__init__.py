"""What both sides share: the versioned wire, the progress channel, the deployment.

The request/answer messages and the chunk messages, the progress channel
interface, the settings a deployment is made of, its image (pins, shipped
sources, the CUDA toolchain step) and the code fingerprint that names it.
Imports neither ``client`` nor ``worker``.
"""

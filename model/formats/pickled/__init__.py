"""The untrusted-pickle corner: the restricted unpickler (``safe_pickle``), the bounds it checks
before it unpickles anything (``bounds``), and the two readers of pickled checkpoints, nanoGPT's
``ckpt.pt`` and LLMs-from-scratch's ``.pth``. Nothing here ever runs ``pickle.load`` unrestricted.
"""

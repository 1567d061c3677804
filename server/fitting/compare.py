def compare_fits(*a, **k):
    raise NotImplementedError

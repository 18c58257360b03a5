def gaussian(values):
    return [round(v * 0.5, 3) for v in values]


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]

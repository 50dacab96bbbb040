"""A script with a syntax error: python's caret display, exit 1.
"""
for i in range(3)
    print(i)

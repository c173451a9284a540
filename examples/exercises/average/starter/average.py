def average(numbers):
    """The average of a list of numbers."""
    return 0  # your code here


if __name__ == "__main__":
    numbers = []
    # Read whole numbers, one per line, until an empty line; then print the average.

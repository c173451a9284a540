"""Function checks of the average exercise: each test_ function is a check."""
from average import average


def test_two_numbers():
    assert average([4, 6]) == 5


def test_one_number():
    assert average([7]) == 7


def test_negative_numbers():
    assert average([-2, -4, 0]) == -2

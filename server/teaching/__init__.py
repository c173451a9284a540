"""What teachers do with the class: the roster, handing out starter files."""

"""What teachers do with their classes: classes, the live roster, handing out starter files."""

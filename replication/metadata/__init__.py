"""The cluster metadata of KRaft mode: its records and log, the image built from them, the controller that writes them, and what brokers load from them."""

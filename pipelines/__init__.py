"""protolake's Spark jobs: bronze (Kafka to Delta), silver (decode to typed tables) and operations."""

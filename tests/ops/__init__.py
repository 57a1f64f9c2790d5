"""Operations: presets, rmq-cluster, rmq-admin, metrics, Docker files."""

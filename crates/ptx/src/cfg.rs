//! Control-flow graphs of PTX function bodies (being written).

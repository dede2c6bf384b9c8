"""Components outside the nodes that mirror catalogs: regional and global components."""

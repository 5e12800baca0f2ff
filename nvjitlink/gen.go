package nvjitlink

//go:generate go run ../gen -lib nvjitlink

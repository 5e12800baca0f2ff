package nvrtc

//go:generate go run ../gen -lib nvrtc

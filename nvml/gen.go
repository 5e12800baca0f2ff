package nvml

//go:generate go run ../gen -lib nvml

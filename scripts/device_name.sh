# Sourced by the GPU check scripts: device_name PYTHON SMOKE sets DEVNAME (torch's name of GPU 0,
# or "cpu" when SMOKE is 1) and SLUG (the name for file names: "NVIDIA H100 80GB HBM3" ->
# nvidia_h100_80gb_hbm3).
device_name() {
  DEVNAME=cpu
  (($2)) || DEVNAME=$("$1" -c "import torch; print(torch.cuda.get_device_name(0))")
  SLUG=$(echo "$DEVNAME" | tr -c 'A-Za-z0-9\n' '_' | tr 'A-Z' 'a-z' | sed 's/__*/_/g; s/_$//')
}

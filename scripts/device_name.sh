# Sourced by the GPU check scripts: device_name PYTHON DEVICE sets DEVNAME and SLUG (the name for
# file names). DEVICE cuda: torch's name of GPU 0 ("NVIDIA H100 80GB HBM3" ->
# nvidia_h100_80gb_hbm3); cpu: the CPU's model and core count ("cpu (Intel(R) Xeon(R)
# Processor, 2 cores)"), slug "cpu".
device_name() {
  if [[ $2 == cpu ]]; then
    local model
    model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
    DEVNAME="cpu (${model:-unknown model}, $(nproc) cores)" SLUG=cpu
    return
  fi
  DEVNAME=$("$1" -c "import torch; print(torch.cuda.get_device_name(0))")
  SLUG=$(echo "$DEVNAME" | tr -c 'A-Za-z0-9\n' '_' | tr 'A-Z' 'a-z' | sed 's/__*/_/g; s/_$//')
}

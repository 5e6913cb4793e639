#!/usr/bin/env bash
# Checkpoints and run folders through the CLI: a corrupt, truncated or unchecked checkpoint is
# refused by every command that loads one (exit 2, one stderr line naming the file); --resume
# with only broken checkpoints stops without touching metrics.jsonl; --resume with --overwrite,
# a --run-dir that is a file or cannot be created, export-hf --out onto a file are refused; a
# full disk (a 16 KiB tmpfs where mounting works, else skipped; a file-size limit always) fails
# with the file named and no temporary file left; a checkpoint written on a GPU loads without one.
# Usage: test_checkpoint_cli.sh RPE_TRAIN HF_PROBE SOURCE_DIR
set -u
bin=$1 probe=$2 src=$3
work=$(mktemp -d)
trap 'umount "$work/full" 2>/dev/null; rm -rf "$work"' EXIT
fails=0

# expect_error "what" "fragment of the message" command...
# (EXPECT_RC=1 for environment failures such as a full disk; 2, the user's fault, by default)
expect_error() {
  local what="$1" fragment="$2" want="${EXPECT_RC:-2}"; shift 2
  "$@" >"$work/out" 2>"$work/err"; local rc=$?
  local lines; lines=$(wc -l <"$work/err")
  if [[ $rc -ne $want || $lines -ne 1 ]] || ! grep -qF -- "$fragment" "$work/err"; then
    echo "FAIL: $what: exit $rc, $lines stderr lines, expected exit $want and one line with '$fragment':"; cat "$work/err"
    fails=$((fails + 1))
  else
    echo "ok: $what: $(cat "$work/err")"
  fi
}
flip_byte() {  # FILE OFFSET
  local b; b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $(( b ^ 90 )))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
no_tmp_left() {  # DIR WHAT (temporary files <name>.tmp.*, staging folders <name>.tmp-<pid>)
  if find "$1" -name '*.tmp[.-]*' | grep -q .; then echo "FAIL: $2 left $(find "$1" -name '*.tmp[.-]*')"; fails=$((fails + 1)); fi
}

# A small random model (+ vocab.txt beside it) and an HF folder made from it.
"$probe" init absolute "$work/m/model.pt" >/dev/null || { echo "FAIL: hf_probe init"; exit 1; }
"$bin" export-hf "$work/m/model.pt" --out "$work/hf" >/dev/null 2>&1 || { echo "FAIL: export-hf of a good model"; exit 1; }
size=$(stat -c %s "$work/m/model.pt")
cat >"$work/swap.yaml" <<'EOF'
model: {attention: {method: m4, share_across_heads: true, add_absolute: true}}
EOF

# A flipped byte, a truncation, and a file without any checksum, through each loading command.
mkdir -p "$work/flip" "$work/trunc" "$work/bare"
cp "$work/m/model.pt" "$work/m/vocab.txt" "$work/flip/"; flip_byte "$work/flip/model.pt" $((size / 2))
cp "$work/m/model.pt" "$work/m/vocab.txt" "$work/trunc/"; truncate -s $((size - 1000)) "$work/trunc/model.pt"
cp "$work/m/model.pt" "$work/m/vocab.txt" "$work/bare/"
truncate -s $((size - 50)) "$work/bare/model.pt"  # drop the checksum and announce no zip comment
printf '\0\0' | dd of="$work/bare/model.pt" bs=1 seek=$((size - 52)) conv=notrunc status=none
for kind in flip trunc bare; do
  f="$work/$kind/model.pt"
  case $kind in flip) why="checksum mismatch";; *) why="no checksum";; esac
  expect_error "export-hf, $kind" "$f: $why" "$bin" export-hf "$f" --out "$work/o_$kind"
  expect_error "inspect, $kind" "$f: $why" "$bin" inspect "$f" --position-weights "$work/w_$kind.json"
  expect_error "swap-method, $kind" "$f: $why" "$bin" swap-method "$f" --config "$work/swap.yaml" --run-dir "$work/s_$kind"
  [[ -e "$work/o_$kind" || -e "$work/s_$kind" ]] && { echo "FAIL: $kind: output written"; fails=$((fails + 1)); }
done
RPE_TRAIN_ALLOW_UNCHECKED=1 "$bin" export-hf "$work/bare/model.pt" --out "$work/o_optin" >/dev/null 2>&1 \
  || { echo "FAIL: RPE_TRAIN_ALLOW_UNCHECKED=1 did not load the bare file"; fails=$((fails + 1)); }

# Output paths that cannot work.
touch "$work/afile"
expect_error "export-hf --out a file" "--out $work/afile: exists and is not a folder" "$bin" export-hf "$work/m/model.pt" --out "$work/afile"
expect_error "import-hf --out a folder" "--out $work/hf: is a folder, expected a file" "$bin" import-hf "$work/hf" --out "$work/hf"
expect_error "import-hf --out under a file" "--out $work/afile/x/m.pt: $work/afile is not a folder" "$bin" import-hf "$work/hf" --out "$work/afile/x/m.pt"

# Run folders: pretrain on a tiny corpus.
head -n 300 "$src/data/sample/corpus.txt" >"$work/corpus.txt"
sets=(--set "data.train_files=[$work/corpus.txt]" --set data.tokenizer_vocab_size=200 --set data.max_seq_len=32
      --set model.hidden=32 --set model.layers=1 --set model.heads=2 --set model.ffn=64 --set model.max_position=32
      --set train.batch_size=8 --set train.max_steps=4 --set train.save_every=2 --set train.log_every=2
      --set train.eval_every=0 --set train.eval_batches=1 --set train.device=cpu --set train.threads=1)
cfg=$src/configs/pretrain/tiny_absolute.yaml
"$bin" pretrain --config "$cfg" --run-dir "$work/run" "${sets[@]}" >"$work/run.log" 2>&1 || { echo "FAIL: pretrain"; cat "$work/run.log"; exit 1; }
expect_error "--resume --overwrite" "excludes --" "$bin" pretrain --config "$cfg" --run-dir "$work/run" --resume --overwrite "${sets[@]}"
expect_error "--run-dir a file" "run folder $work/afile exists and is not a folder" "$bin" pretrain --config "$cfg" --run-dir "$work/afile" "${sets[@]}"
expect_error "--run-dir under a file" "cannot create run folder $work/afile/run" "$bin" pretrain --config "$cfg" --run-dir "$work/afile/run" "${sets[@]}"
cp "$work/run/metrics.jsonl" "$work/metrics.before"
for f in "$work"/run/checkpoints/step_*.pt; do flip_byte "$f" 200; done
expect_error "--resume, every checkpoint corrupt" "--resume: no usable checkpoint in $work/run/checkpoints" \
  "$bin" pretrain --config "$cfg" --run-dir "$work/run" --resume "${sets[@]}"
cmp -s "$work/metrics.before" "$work/run/metrics.jsonl" || { echo "FAIL: a refused --resume rewrote metrics.jsonl"; fails=$((fails + 1)); }
expect_error "finetune --init, corrupt run" "--init $work/run: no usable checkpoint in this run folder" \
  "$bin" finetune squad --config "$src/configs/finetune/tiny_squad.yaml" --init "$work/run" --run-dir "$work/ft"

# A checkpoint written on a GPU names cuda:0 as its tensors' device: a machine without a GPU
# must still read it (into host memory) and get the same weights. Stand-in: the model file with
# its storage location rewritten (loaded unchecked: the rewrite changes the checksummed bytes).
python3 - "$work/m/model.pt" "$work/m/model_gpu.pt" <<'PY' || { echo "FAIL: could not make the GPU-written stand-in"; fails=$((fails + 1)); }
import sys, zipfile
src, dst = sys.argv[1:3]
moved = 0
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
    for info in zin.infolist():
        data = zin.read(info)
        if info.filename.endswith("/data.pkl"):  # the pickled storage location, once (memoised)
            cpu, cuda = b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0"
            moved += data.count(cpu)
            data = data.replace(cpu, cuda)
        zout.writestr(info.filename, data)
sys.exit(0 if moved == 1 else f"expected one storage location 'cpu', found {moved}")
PY
if RPE_TRAIN_ALLOW_UNCHECKED=1 "$bin" export-hf "$work/m/model_gpu.pt" --out "$work/hf_gpu" >"$work/out" 2>&1 &&
   cmp -s "$work/hf/model.safetensors" "$work/hf_gpu/model.safetensors"; then
  echo "ok: a GPU-written checkpoint loads without a GPU, same weights"
else
  echo "FAIL: a GPU-written checkpoint on a machine without a GPU:"; cat "$work/out"; fails=$((fails + 1))
fi

# Loaded unchecked (RPE_TRAIN_ALLOW_UNCHECKED=1), a file that does not parse is not said to match a checksum.
head -c 5000 /dev/urandom >"$work/m/junk.pt"
expect_error "unchecked junk" "junk.pt: not a readable rpe-train checkpoint (loaded unverified, it has no checksum" \
  env RPE_TRAIN_ALLOW_UNCHECKED=1 "$bin" export-hf "$work/m/junk.pt" --out "$work/junk_hf"

# A full disk: a file-size limit (EFBIG, no root needed), then a real ENOSPC on a tiny tmpfs.
mkdir -p "$work/limited"
EXPECT_RC=1 expect_error "import-hf past a file-size limit" "cannot write $work/limited/m.pt: File too large" \
  bash -c 'trap "" XFSZ; ulimit -f 16; exec "$@"' _ "$bin" import-hf "$work/hf" --out "$work/limited/m.pt"
no_tmp_left "$work/limited" "import-hf past a file-size limit"
mkdir -p "$work/full"
if mount -t tmpfs -o size=16k none "$work/full" 2>/dev/null; then
  EXPECT_RC=1 expect_error "import-hf on a full disk" "no space left on device: $work/full/m.pt" "$bin" import-hf "$work/hf" --out "$work/full/m.pt"
  no_tmp_left "$work/full" "import-hf on a full disk"
  EXPECT_RC=1 expect_error "export-hf on a full disk" "no space left on device: $work/full/hf.tmp-" \
    "$bin" export-hf "$work/m/model.pt" --out "$work/full/hf"
  no_tmp_left "$work/full" "export-hf on a full disk"
  umount "$work/full"
else
  echo "skip: cannot mount a tmpfs here (the file-size limit above covers the error path)"
fi

(( fails == 0 )) && { echo "all passed"; exit 0; }
echo "$fails failed"; exit 1

cd /work/main
run() { # round card scenario mode
  S=$(date +%s.%N); .venv/bin/suite run --round $1 --benchmark $2 --stand-in --scenario $3 --mode $4 --runs-dir /tmp/standin/runs >/tmp/standin/last.out 2>&1; rc=$?
  E=$(date +%s.%N); v=$(grep -oE "\| (VALID|INVALID) " /tmp/standin/last.out | head -1); echo "$1 $2 $3 $4 rc=$rc $(python3 -c "print(round($E-$S,1))") s $v"
}
for c in "v6.1 bert-99 singlestream offline" "v6.1 whisper offline" "v6.1 yolo-95 singlestream multistream offline" "v6.1 3d-unet-99 singlestream offline" "v6.0 retinanet singlestream multistream server offline"; do
  set -- $c; r=$1; b=$2; shift 2
  for s in "$@"; do run $r $b $s performance; done
  run $r $b offline accuracy
done

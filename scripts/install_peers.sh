#!/bin/sh
# Install the peer brokers of `rmq-bench compare` from Debian's packages, only those missing.
#
# nats-server, redis-server and rabbitmq-server are installed with apt-get when their binary is not on PATH
# (or in /usr/sbin, /usr/lib/rabbitmq/bin). Running it again does nothing. The packages' own services are
# not started here (policy-rc.d refuses service starts during the install, and the script does not enable
# them): the benchmark starts its own servers on 127.0.0.1 with their data in a temporary directory.
# A package that cannot be installed is reported and the script goes on; the benchmark then reports that
# peer as "not installed". Exit status: 0 when every peer is present afterwards, 1 otherwise.
set -u

have() {
    command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/lib/rabbitmq/bin/$1" ]
}

missing=""
have nats-server || missing="$missing nats-server"
have redis-server || missing="$missing redis-server"
have rabbitmq-server || missing="$missing rabbitmq-server"

if [ -z "$missing" ]; then
    echo "install_peers: nats-server, redis-server and rabbitmq-server already installed"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi

# Keep the packages' init scripts from starting system-wide daemons during the install: only when no
# policy-rc.d exists already, and removed again afterwards.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null && $SUDO chmod 755 "$policy" && made_policy=1
fi

echo "install_peers: installing$missing"
$SUDO apt-get update -qq || echo "install_peers: apt-get update failed; trying the install anyway"
status=0
for package in $missing; do
    if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$package"; then
        echo "install_peers: could not install $package; the benchmark will report it as not installed"
        status=1
    fi
done

if [ "$made_policy" -eq 1 ]; then
    $SUDO rm -f "$policy"
fi
exit $status
